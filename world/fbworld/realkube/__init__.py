"""What a stand-in controller needs to run against a real kube-apiserver (RealKube, Reconciler,
run_controllers), and the one stand-in the tests still run there: NodeHealthCheck (nhc.py), whose
upstream module the Go module proxy does not serve. Argo Rollouts, KEDA, Kueue and JobSet run for real
(tests/support/*_controller.py)."""

from .controllers import Conflict, RealKube, Reconciler, run_controllers
from .nhc import NodeHealthChecks

__all__ = ["Conflict", "NodeHealthChecks", "RealKube", "Reconciler", "run_controllers"]
