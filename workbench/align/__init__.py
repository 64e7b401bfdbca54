"""The staged alignment method: its stages (datasets/align_stages.yaml), the plan that names each
stage's artifacts (plan.yaml), and the report that runs every stage whose artifacts exist."""
