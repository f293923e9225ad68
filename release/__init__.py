"""Whether a checkpoint serves: the off-policy estimate of a candidate's gain and its bound
(``offpolicy``), the gate's rules (``gate``), the candidate's behaviour against its parent's
(``candidate_evals``) and its pass rate on the shipped tasks (``task_evals``), and the live
canary's verdict (``canary``, read from the warehouse by ``canary_io``; ``rtrl canary`` in
``cli``, ``rtrl gate evaluate`` in ``gate_cli``, their options in ``cli_options``)."""
