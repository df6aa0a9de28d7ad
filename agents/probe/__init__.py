"""Counterfactual grounding probes: edit the evidence in the signal and see whether the answer follows.

* :mod:`ecgtrace.agents.probe.builder` builds a probe set from a dataset
  (originals, counterfactuals, drops with reasons; layout in
  :mod:`ecgtrace.contracts.probe`);
* :mod:`ecgtrace.agents.probe.audit` / :mod:`ecgtrace.agents.probe.qa` make the
  counterfactuals of audit and QA items (the signal edits are
  :mod:`ecgtrace.tools.counterfactual`; the pipeline that confirms them is the
  one every window goes through);
* :mod:`ecgtrace.agents.probe.metrics` pairs the answers of a probe run:
  sensitivity, grounded accuracy, localization follow, invariance, McNemar.

The run itself (the audit graph for audit items, the QA runner for QA items,
one run loop) is :mod:`ecgtrace.graphs.probe_runner`.
"""
