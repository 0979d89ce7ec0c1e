"""The agents that ship with arena; ``strategies.registry`` names them."""
