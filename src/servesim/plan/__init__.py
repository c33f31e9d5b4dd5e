"""Planning: the numbers each command shows, composed from the layers below (imports
:mod:`servesim.sim`, :mod:`servesim.hardware` and :mod:`servesim.model`): the lab's planner and
summaries, capacity at load and the deployment search, engine predictions, validation of every
closed form against simulation, and the curves behind each figure.  Results are plain
dataclasses and dicts; nothing here prints or draws."""
