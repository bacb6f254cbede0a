"""The one way in: typed requests, one policy check, one executor, one audit entry."""
