"""Gradient injection and the offline optimizer check (issue 10 §3–§4).

- :mod:`.captured`: one captured step (``ROOT/step_N/{grads,params_before,params_after,exp_avg,exp_avg_sq}``)
  read under the target framework's names through the ``converters/`` spec, one tensor at a time.
- :mod:`.inject`: captured gradients in a MindSpore optimizer's parameter order.
"""
