"""One cohort: what it is, its plan, how it runs, and the loop that writes it.

* ``cohort``: ``CohortConfig``, the settings a user chooses, and the cohort id they hash to.
* ``plan``: ``plan_cohort``, the universe and the ``Schedule`` of instants, decided once from the
  tape and the settings before the first event (``plan_cohorts``: the starts of a range that
  decide something, and why the others are skipped).
* ``settings``: ``RunOptions`` (how cohorts run, never in an id) and ``RunSettings``, a cohort
  and its options carried whole to wherever it runs.
* ``runner``: ``CohortRunner``, the deterministic replay loop: prices walked forward, agents asked
  through ``arena.boundary``, orders to the broker, every event recorded into a sink.
* ``transcript``: a decision's model calls as ``ModelCalled`` / ``PromptStored`` events.
"""
