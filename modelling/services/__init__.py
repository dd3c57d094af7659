"""Services of the modelling app: agreement statistics, agreement snapshots and charts."""
