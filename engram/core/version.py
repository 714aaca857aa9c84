"""The version of engram, in one place: the package, the store's messages and the entry points read it."""

VERSION = "0.1.0"
