"""The vocabulary every layer shares, as Kubernetes' apimachinery holds it: JSON/YAML coding,
API errors, name rules, ObjectMeta rules, label and field selectors, JSONPath and query options."""
