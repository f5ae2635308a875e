"""The array types of the numeric code: one alias each, for type annotations."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["FloatArray", "IntArray"]

FloatArray = npt.NDArray[np.float64]
"""An array of 64-bit floats (SI quantities, costs, probabilities)."""
IntArray = npt.NDArray[np.int64]
"""An array of 64-bit integers (indices, counts)."""
