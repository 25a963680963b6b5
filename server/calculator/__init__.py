"""The memory calculator page: model-state bytes per card for any (model, cards, ZeRO/FSDP) setup."""
