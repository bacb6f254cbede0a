"""The demo fleet `firebreak console` brings when nothing is configured: Kubernetes API emulators
for three cells and the fleet context, a simulated Prometheus, and game-day drills replayed on them."""
