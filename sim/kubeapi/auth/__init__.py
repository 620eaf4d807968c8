"""Authentication (admin token, ServiceAccount tokens) and RBAC authorization."""
