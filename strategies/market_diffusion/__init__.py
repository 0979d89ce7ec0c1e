"""The market diffusion forecaster: forecastbench's logit diffusion model (``strategies.diffusion``)
conditioned on what is knowable about a market at the instant of a forecast (``features``),
trained on resolved markets' price paths (``examples``), kept in an ``.npz`` file (``model``),
and asked at every decision (``forecaster``)."""
