"""The algorithm as pure functions: advantages, KL estimators, policy losses, pass@k / maj@k."""
