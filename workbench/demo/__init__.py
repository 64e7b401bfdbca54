"""The demo of the whole alignment method on the CPU reference models: the fault catalog (:mod:`.catalog`)
and the planting of its faults on the MindSpore side (:mod:`.faults`)."""
