"""The seeds' paper checks as claims (:mod:`.framework`), one module per paper named after its method; importing
the package registers every paper's claims in :data:`.framework.CLAIMS`."""
from . import fedgwc_004, heterogeneity, home, louvain_002  # noqa: F401  (registers the claims)
