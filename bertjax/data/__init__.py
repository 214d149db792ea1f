"""The SeqIO data layer: vocabularies, sources, preprocessors, feature converters.

Import submodules directly (`from bertjax.data import vocabularies`); this package
imports nothing itself, so `import bertjax.data` costs nothing.
"""
