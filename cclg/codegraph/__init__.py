"""The code graph: which files of a repository define, use and import what.

``languages`` maps file suffixes to tree-sitter grammars and holds the tag
queries; ``parse`` turns one source file into its definitions, references and
import specs; ``resolve`` maps import specs to the repository files they name.
"""
