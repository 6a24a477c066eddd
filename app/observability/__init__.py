"""What operators read: Prometheus series, the audit log and its search."""
