"""The constants of the row hashes' definition (:mod:`dsort.core.arrow_hash`), shared by its NumPy
passes and its compiled loops (:mod:`dsort.core._arrow_hash_jit`): other constants make other
checksums of the same values (``VERSION`` names the definition in a manifest)."""

from __future__ import annotations

import numpy as np

# another version makes other checksums of the same values (a manifest written with another one is
# not held to its checksum). 2: strings over 16 bytes hashed by word.
VERSION = 2
NULL = np.uint64(0x9E3779B97F4A7C15)
K = np.uint64(0xFF51AFD7ED558CCD)  # odd: the polynomial's base and the fold's multiplier
LIST = np.uint64(0xC2B2AE3D27D4EB4F)
BYTES = np.uint64(0x165667B19E3779F9)
STRUCT = np.uint64(0x27D4EB2F165667C5)
ROW = np.uint64(0x85EBCA77C2B2AE63)
# SplitMix64's finalizer: x ^= x >> 30; x *= MIX1; x ^= x >> 27; x *= MIX2; x ^= x >> 31
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)
