"""What plan.py builds on: the plan's model (changes.py: Action, Change, Plan ...) and the
planning of what ends or re-addresses an object (removals.py: Removed, Moved and Import
documents, prune, protection, the order of deletes).  ``govsync.plan`` re-exports their
public names, so ``from govsync.plan import Change`` stays the way in."""
