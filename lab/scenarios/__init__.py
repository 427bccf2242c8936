"""Scenarios: clients run as separate processes against a refka cluster while a
plan changes it, each writing what it did as JSON lines, and an audit of those
logs (``ordered_delivery``: KIP-253's keyed order across partition changes)."""
