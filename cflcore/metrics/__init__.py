"""Pure metric functions (docs/architecture.md §8): external clustering scores against the ground truth, internal
scores on the update vectors (from their Gram matrix), the Wasserstein Adjusted Scores of 004, and
PF1 / GF1 / learning gap of 000 §4.4. Every score is scikit-learn's; undefined scores are ``None``."""
from .external import (
    EXTERNAL_SCORES,
    adjusted_mutual_info,
    adjusted_rand,
    completeness,
    external_scores,
    homogeneity,
    published_com,
    rand_index,
    v_measure,
)
from .internal import (
    davies_bouldin_from_gram,
    distances_from_gram,
    embedding_from_gram,
    partition_is_scorable,
    silhouette_authors_from_distances,
    silhouette_from_distances,
    silhouette_from_gram,
)
from .personalisation import (
    PersonalisationScores,
    learning_gap,
    personalisation_by_round,
    personalisation_scores,
    size_weighted_bacc,
)
from .wasserstein import (
    class_frequencies,
    rank_sorted,
    sorted_frequency_wasserstein,
    wasserstein_davies_bouldin,
    wasserstein_distance_matrix,
    wasserstein_silhouette,
)

__all__ = [
    "EXTERNAL_SCORES", "adjusted_mutual_info", "adjusted_rand", "completeness", "external_scores",
    "homogeneity", "published_com", "rand_index", "v_measure",
    "davies_bouldin_from_gram", "distances_from_gram", "embedding_from_gram", "partition_is_scorable",
    "silhouette_authors_from_distances", "silhouette_from_distances", "silhouette_from_gram",
    "PersonalisationScores", "learning_gap", "personalisation_by_round", "personalisation_scores",
    "size_weighted_bacc",
    "class_frequencies", "rank_sorted", "sorted_frequency_wasserstein", "wasserstein_davies_bouldin",
    "wasserstein_distance_matrix", "wasserstein_silhouette",
]
