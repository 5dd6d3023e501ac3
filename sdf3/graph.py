"""A (C)SDF graph as SDF3 sees it: actors with per-phase execution times, channels with
per-phase production and consumption rates, initial tokens and token size.

An SDF actor is a CSDF actor with one phase. Rates of a channel are given per phase of its
source (`prod`) and of its destination (`cons`); SDF3's XML puts them on ports, which
`sdf3.xml` derives from the channels (one port per channel end).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Actor:
    name: str
    phases: int = 1
    exec_times: list[int] = field(default_factory=list)  # one per phase; empty means all 1
    type: str = ""
    processor: str = "p0"

    def exec_time(self, phase: int) -> int:
        return self.exec_times[phase] if self.exec_times else 1


@dataclass
class Channel:
    name: str
    src: str
    dst: str
    prod: list[int]            # tokens produced per phase of src (len == src.phases)
    cons: list[int]            # tokens consumed per phase of dst (len == dst.phases)
    initial_tokens: int = 0
    token_size: int = 1        # elements per token (a CNN row: C * W elements)
    src_port: str = ""
    dst_port: str = ""
    capacity: int | None = None  # tokens; None = unbounded (SDF3 channelProperties bufferSize)


@dataclass
class Graph:
    name: str
    actors: dict[str, Actor] = field(default_factory=dict)
    channels: list[Channel] = field(default_factory=list)

    def add_actor(self, actor: Actor) -> Actor:
        self.actors[actor.name] = actor
        return actor

    def add_channel(self, channel: Channel) -> Channel:
        if len(channel.prod) != self.actors[channel.src].phases:
            raise ValueError(f"channel {channel.name}: {len(channel.prod)} production rates for "
                             f"{self.actors[channel.src].phases} phases of {channel.src}")
        if len(channel.cons) != self.actors[channel.dst].phases:
            raise ValueError(f"channel {channel.name}: {len(channel.cons)} consumption rates for "
                             f"{self.actors[channel.dst].phases} phases of {channel.dst}")
        self.channels.append(channel)
        return channel

    def channel(self, name: str) -> Channel:
        for ch in self.channels:
            if ch.name == name:
                return ch
        raise KeyError(name)
