"""A federation from a file, shipped with cflcore and loaded as an installed distribution's plug-ins are
(cflcore.external.BUNDLED): the dataset kind ``table`` (:mod:`.table`) and the split generator ``natural``
(:mod:`.natural`). A job imports them only when it selects them, and only its code hash covers them."""

FEDERATION_KEYS = ("table", "classes", "image_size")
"""The keys of a natural split entry that declare its table (:mod:`.natural`), given to the table dataset too."""
FEDERATION_KEY = "federation"
"""The data settings' key holding them (cflcore.config.plan.data_settings; :mod:`.table` reads it)."""
