"""Small torch factories for the importer tests (imported by module path, like a user's own code)."""
from __future__ import annotations

import torch
from torch import nn


def tiny_mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def tiny_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(4 * 4 * 4, 10),
    )


def tiny_embedding() -> nn.Module:
    return nn.Sequential(nn.Embedding(100, 16), nn.Linear(16, 16, bias=False))


class _Scaled(nn.Module):
    """A parameter held by a non-leaf module and a functional matmul outside any leaf."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(6))
        self.fc = nn.Linear(6, 6)
        self.proj = nn.Parameter(torch.ones(6, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.fc(x) * self.scale) @ self.proj


def tiny_functional() -> nn.Module:
    return _Scaled()


def shared_twice() -> nn.Module:
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(5, 5)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(self.fc(x))

    return Twice()


def broken() -> nn.Module:
    raise RuntimeError("no such checkpoint")


def not_a_module() -> int:
    return 42


NOT_CALLABLE = 3
