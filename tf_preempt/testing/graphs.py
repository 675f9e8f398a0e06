"""Questions about traced graphs that tests ask: what does this op wait for?

A `tf.function`'s graph orders ops by data edges and by the control edges
that automatic control dependencies add (stateful ops on one resource, the
collectives' ordering token). These helpers walk both.
"""

from typing import Dict, Iterable, List, Set


def ancestors(op, control: bool = True) -> Set:
  """Returns every op that `op` waits for.

  Args:
    op: a graph operation.
    control: follow control edges too (what the op waits for); without them
      only the ops whose values flow into `op` (where its data comes from).

  Returns:
    The set of ancestor operations.
  """
  seen: Set = set()
  stack = [op]
  while stack:
    current = stack.pop()
    deps = [t.op for t in current.inputs]
    if control:
      deps += list(current.control_inputs)
    for dep in deps:
      if dep not in seen:
        seen.add(dep)
        stack.append(dep)
  return seen


def variable_placeholders(graph, variables) -> Dict[str, List]:
  """Maps each variable's path to the graph's placeholders of its handle.

  A distributed variable has one component per device; each captured
  component becomes its own resource placeholder.
  """
  found: Dict[str, List] = {}
  for external, internal in graph.captures:
    for var in variables:
      for component in getattr(var, "values", None) or [var]:
        if external is component.handle:
          found.setdefault(var.path, []).append(internal.op)
  return found


def _ops_on(graph, placeholders: Iterable, predicate) -> List:
  placeholders = set(placeholders)
  return [op for op in graph.get_operations()
          if predicate(op.type) and op.inputs and
          op.inputs[0].op in placeholders]


def reads_of(graph, placeholders) -> List:
  """ReadVariableOps of the given resource placeholders, in graph order."""
  return _ops_on(graph, placeholders, lambda t: t == "ReadVariableOp")


def updates_of(graph, placeholders) -> List:
  """Assign*VariableOp / ResourceApply* ops on the given placeholders."""
  return _ops_on(graph, placeholders,
                 lambda t: t.startswith(("Assign", "ResourceApply")))


def consumers_of_type(ops: Iterable, op_type: str) -> List:
  """The ops of `op_type` that read an output of any of `ops`."""
  out = []
  for op in ops:
    for tensor in op.outputs:
      out.extend(c for c in tensor.consumers() if c.type == op_type)
  return out


def collective_reductions(graph) -> List:
  """All-reduce ops (CollectiveReduceV2 and older) in graph order."""
  return [op for op in graph.get_operations()
          if op.type in ("CollectiveReduceV2", "CollectiveReduce",
                         "NcclAllReduce")]
