"""Execution models: what an order gets from an order book, as pure functions.

An ``ExecutionModel`` (``fa``, ``mid``, ``touch``, ``l2``; ``model_for(name, **params)``) turns
one ``Order`` (a BUY of dollars or a SELL of shares) and one ``OrderBook`` snapshot into a
``Fill`` of legs, one per level taken at that level's price, or a ``Rejection`` with a reason a
person can read. Nothing here keeps state: the cash before the order and the levels already
taken from the snapshot (``Consumed``) come in, and the fill hands the new consumption back.

Arithmetic (``ledger.execution.exact``): exact ``Decimal``. Prices, sizes, amounts and fees are
read exactly (a float as its double's exact value) and summed and multiplied without rounding.
The one rounding is the shares the last dollars buy at a level: to the nearest double, the
``fa`` rule's own division, or down to a share step. So ``float()`` of an ``fa`` fill is the
broker's arithmetic to the last bit, and ``l2`` on a flat book (``OrderBook.flat_at``: one
infinitely deep level at the price) with no fee gives exactly the ``fa`` fill.

The fee is a callable (``TakerFee``), so a fee schedule meets the models at the broker.
"""

from ledger.execution.book import OrderBook, Reason, Rejection
from ledger.execution.fills import (
    Consumed,
    FeeUnknown,
    Fill,
    Leg,
    LevelKey,
    Order,
    TakerFee,
    no_fee,
)
from ledger.execution.models import (
    MODELS,
    ExecutionModel,
    FaModel,
    L2Model,
    MidModel,
    TouchModel,
    model_for,
    params_hash,
)

__all__ = [
    "MODELS",
    "Consumed",
    "ExecutionModel",
    "FaModel",
    "FeeUnknown",
    "Fill",
    "L2Model",
    "Leg",
    "LevelKey",
    "MidModel",
    "Order",
    "OrderBook",
    "Reason",
    "Rejection",
    "TakerFee",
    "TouchModel",
    "model_for",
    "no_fee",
    "params_hash",
]
