"""The closed forms, standard library only: speculative decoding, queueing (Erlang, M/G/c),
KV-cache transfer and the lab's reference serving model.

Nothing here imports from another layer of servesim; the modules import in milliseconds.
"""
