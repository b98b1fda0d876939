"""The anti-stagnation reflex (HMP): novelty.py measures (n-grams, embeddings), verdict.py decides and applies
reflex-lite, escalation.py diagnoses a persisting loop and applies the break-out mechanisms."""
