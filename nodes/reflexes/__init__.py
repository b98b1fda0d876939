"""The reflexes' logic, apart from the steps that run them (steps/s07–s09, s06 for self-assessment):
emotion.py, anti_stagnation/, validation.py, self_assessment.py, and evaluation.py — the one structured call
the emotional rating and HMP's novelty comparison share."""
