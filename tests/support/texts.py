"""Memory texts that stay apart: random words around a unique token, so resolution merges nothing."""

from __future__ import annotations

import random

WORDS = (
    "apple river engine window garden pencil rocket candle forest marble harbor violin tunnel blanket "
    "compass ladder meadow cabinet lantern saddle pepper glacier mirror orchard bucket falcon quartz "
    "hammer basket canyon feather helmet island jacket kettle lemon magnet needle oyster parrot quilt "
    "ribbon spider tractor umbrella valley walnut yogurt zipper anchor barrel carpet dolphin eagle "
    "fountain guitar hazel igloo jungle kayak lobster mango nutmeg olive pirate rabbit salmon tomato "
    "velvet wizard badger cactus donkey elbow fabric goblet hollow insect jigsaw kitten lagoon mitten "
    "noodle otter pebble radish sponge thimble tulip vacuum wagon yacht beacon cobalt dagger ember fossil "
    "gravel hatchet ivory juniper kernel"
).split()


def salad(rng: random.Random, token: str, n: int = 6) -> str:
    """A memory text around a unique token: random words keep memories apart for the resolver."""
    return f"Note {token}: " + " ".join(rng.sample(WORDS, n)) + "."
