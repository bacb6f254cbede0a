"""Stand-ins for the controllers a bare kube-apiserver lacks (Kueue, Argo Rollouts, KEDA), talking to
a real API server over its REST API. The emulator's controllers (fbworld.kube.controllers) model the
same upstream code against the emulator's store; these reuse their pure parts."""

from .controllers import ArgoAbort, KedaPause, KueueJobSets, RealKube, run_controllers

__all__ = ["ArgoAbort", "KedaPause", "KueueJobSets", "RealKube", "run_controllers"]
