"""What keeps memory healthy between thoughts: manager.py (novelty and LRU pruning, archive/restore),
abstracts.py (thematic digests), episodes.py (day, week and month summaries), and their prompts."""
