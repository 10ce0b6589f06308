"""Community detection on a client similarity graph: Louvain (networkx; 002 §IV-B) and Leiden (leidenalg, the
``leiden`` extra, or a networkx backend)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import ConfigError
from .partition import consecutive_labels

if TYPE_CHECKING:  # networkx is imported where a graph is built: a train or whatif job without a
    import networkx as nx  # community clusterer does not pay its ~0.2 s import


def similarity_graph(similarity: np.ndarray, nodes: np.ndarray | None = None) -> nx.Graph:
    """Undirected graph with an edge (i, j) of weight ``similarity[i, j]`` for every pair with a positive,
    finite similarity; zero / negative / NaN (unknown) similarities give no edge. Nodes are 0..n−1
    unless ``nodes`` (labels for the rows) is given."""
    import networkx as nx

    sim = np.asarray(similarity, dtype=np.float64)
    n = sim.shape[0]
    names = np.arange(n) if nodes is None else np.asarray(nodes)
    graph = nx.Graph()
    graph.add_nodes_from(int(v) for v in names)
    rows, cols = np.triu_indices(n, k=1)
    w = sim[rows, cols]
    keep = np.isfinite(w) & (w > 0)
    graph.add_weighted_edges_from(
        (int(names[i]), int(names[j]), float(x)) for i, j, x in zip(rows[keep], cols[keep], w[keep])
    )
    return graph


def _similarity(distance: np.ndarray, exponent: float, normalise: bool) -> np.ndarray:
    """The similarity of the known (finite) off-diagonal entries of ``distance``, 1 for every known pair when all
    known distances are equal; unknown entries stay NaN (no edge). ``normalise``: 002 eq. 3's
    (1 − (v − min)/(max − min))^e; else (max − v)^e."""
    d = np.array(distance, dtype=np.float64)
    np.fill_diagonal(d, np.nan)
    known = np.isfinite(d)
    sim = np.full_like(d, np.nan)
    if not known.any():
        return sim
    lo, hi = float(d[known].min()), float(d[known].max())
    if hi - lo <= 1e-15 * max(1.0, abs(hi)):
        sim[known] = 1.0
    elif normalise:
        sim[known] = (1.0 - (d[known] - lo) / (hi - lo)) ** exponent
    else:
        sim[known] = (hi - d[known]) ** exponent
    return sim


def normalised_similarity(distance: np.ndarray, exponent: float) -> np.ndarray:
    """002 eq. 3 then x → x^exponent: s = (1 − (v − min)/(max − min))^e over the known (finite)
    off-diagonal entries; unknown entries stay NaN (no edge). max = min → every known pair has s = 1."""
    return _similarity(distance, exponent, normalise=True)


def raw_similarity(distance: np.ndarray, exponent: float) -> np.ndarray:
    """002 Fig. 2's non-normalised similarity: s = (max − v)^e over the known (finite) off-diagonal entries,
    without eq. 3's division by (max − min); unknown entries stay NaN (no edge). It is
    :func:`normalised_similarity` times (max − min)^e, so Louvain's modularity (invariant to scaling every edge
    weight) gives the same partition up to floating point; only the similarity values' scale differs. Equal
    distances give s = 1 for every known pair, as in :func:`normalised_similarity`."""
    return _similarity(distance, exponent, normalise=False)


LEIDEN_INSTALL_HINT = "pip install -e '.[leiden]' (leidenalg + igraph from PyPI)"


def _leidenalg_importable() -> bool:
    try:
        import igraph  # noqa: F401
        import leidenalg  # noqa: F401
    except ImportError:
        return False
    return True


def _networkx_leiden_backend() -> bool:
    """networkx ≥ 3.5 exposes ``leiden_communities`` only as a dispatch API: it needs a backend
    (e.g. nx-cugraph, GPU only); plain networkx raises NotImplementedError."""
    import networkx as nx

    if not hasattr(nx.community, "leiden_communities"):
        return False
    try:
        nx.community.leiden_communities(nx.path_graph(3), seed=0)
    except NotImplementedError:
        return False
    return True


def leiden_backend() -> str | None:
    """Which implementation the ``leiden`` clusterer uses: ``"leidenalg"`` (Traag's reference implementation on
    igraph, CPU; the ``leiden`` extra), else ``"networkx"`` when a networkx dispatch backend implements
    ``leiden_communities``, else None (the clusterer is refused at config validation)."""
    if _leidenalg_importable():
        return "leidenalg"
    if _networkx_leiden_backend():
        return "networkx"
    return None


def leiden_available() -> bool:
    """True where the ``leiden`` clusterer can run (:func:`leiden_backend` found an implementation)."""
    return leiden_backend() is not None


def leidenalg_communities(graph: nx.Graph, resolution: float, seed: int) -> list[set[int]]:
    """Leiden communities of the weighted ``graph`` with leidenalg's ``RBConfigurationVertexPartition`` (modularity
    with resolution γ: Σ_ij (A_ij − γ k_i k_j / 2m) δ(c_i, c_j), the quantity networkx's ``resolution`` scales),
    iterated until no improvement (``n_iterations=-1``), seeded (leidenalg takes the seed modulo 2³¹)."""
    import igraph as ig
    import leidenalg as la

    nodes = sorted(graph.nodes)
    index = {v: i for i, v in enumerate(nodes)}
    edges = list(graph.edges(data="weight"))
    g = ig.Graph(n=len(nodes), edges=[(index[u], index[v]) for u, v, _ in edges])
    partition = la.find_partition(g, la.RBConfigurationVertexPartition, weights=[float(w) for _, _, w in edges],
                                  resolution_parameter=float(resolution), n_iterations=-1, seed=int(seed) % 2 ** 31)
    return [{nodes[i] for i in members} for members in partition if members]


def networkx_resolution(resolution: float) -> float:
    """networkx's γ for 002's resolution r (higher r = fewer, larger communities, 002 §IV-B): γ = 1/r.
    Lambiotte's Markov-time modularity Σ_c [r·L_c/m − (d_c/2m)²] is proportional to networkx's
    Σ_c [L_c/m − γ (d_c/2m)²] for γ = 1/r; at 1.0 both conventions agree."""
    if not resolution > 0:
        raise ConfigError(f"resolution: {resolution!r} is not allowed; allowed: a number > 0")
    return 1.0 / float(resolution)


def community_labels(similarity: np.ndarray, resolution: float, seed: int, algorithm: str = "louvain") -> np.ndarray:
    """Labels 0..K−1 of the communities of ``similarity_graph(similarity)`` (seeded networkx Louvain, or
    Leiden through :func:`leiden_backend`). Isolated nodes become singleton communities.
    ``resolution`` follows 002's convention (higher = fewer, larger communities) for every caller, the
    Louvain CFL strategy and OCFL's ``louvain``/``leiden`` clusterers alike."""
    import networkx as nx

    graph = similarity_graph(similarity)
    resolution = networkx_resolution(resolution)
    n = int(np.asarray(similarity).shape[0])
    if graph.number_of_edges() == 0:
        return np.arange(n, dtype=np.int64)  # no positive similarity: every client is its own community
    if algorithm == "louvain":
        communities = nx.community.louvain_communities(graph, weight="weight", resolution=resolution, seed=seed)
    elif algorithm == "leiden":
        backend = leiden_backend()
        if backend is None:
            raise ConfigError(f"clusterer: 'leiden' needs leidenalg ({LEIDEN_INSTALL_HINT}) or a networkx backend "
                              f"providing leiden_communities; allowed without one: louvain")
        if backend == "leidenalg":
            communities = leidenalg_communities(graph, resolution, seed)
        else:
            communities = nx.community.leiden_communities(graph, weight="weight", resolution=resolution, seed=seed)
    else:
        raise ConfigError(f"community algorithm {algorithm!r} is not allowed; allowed: louvain, leiden")
    labels = np.empty(n, dtype=np.int64)
    for k, members in enumerate(sorted(communities, key=min)):
        labels[list(members)] = k
    return consecutive_labels(labels)

