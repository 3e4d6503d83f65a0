"""The diagnosis model: featurisation, the classifier head, persistence, inference."""
