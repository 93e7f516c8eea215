"""SASRec (Kang & McAuley, 2018): self-attentive next-item model.

The module and parameter names follow the widely used PyTorch layout of SASRec,
because the official PersonalWAB checkpoint (`pwab.pth`) is a state dict in that
layout; keeping the names and the forward computation lets it load unchanged and
give the same scores. This is the only recommender module that imports torch at
import time; everything else imports it lazily.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

LAYER_NORM_EPS = 1e-8
DEFAULT_NUM_HEADS = 2  # not recoverable from tensor shapes


@dataclass(frozen=True)
class SASRecConfig:
    """Network shape; the defaults are the ones PersonalWAB's checkpoint was trained with."""

    hidden_units: int = 50
    num_blocks: int = 2
    num_heads: int = DEFAULT_NUM_HEADS
    dropout_rate: float = 0.5
    maxlen: int = 30


class PointWiseFeedForward(nn.Module):
    """Two position-wise linear maps (as 1x1 convolutions, for the checkpoint's names) plus a residual."""

    def __init__(self, hidden_units: int, dropout_rate: float) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(hidden_units, hidden_units, kernel_size=1)
        self.dropout1 = nn.Dropout(p=dropout_rate)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv1d(hidden_units, hidden_units, kernel_size=1)
        self.dropout2 = nn.Dropout(p=dropout_rate)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        # Conv1d wants channels before time: (batch, hidden, time).
        hidden = self.dropout1(self.relu(self.conv1(inputs.transpose(-1, -2))))
        outputs = self.dropout2(self.conv2(hidden)).transpose(-1, -2)
        return outputs + inputs


class SASRec(nn.Module):
    """Causal self-attention over a left-padded item sequence (item id 0 is padding)."""

    def __init__(self, user_num: int, item_num: int, config: SASRecConfig) -> None:
        super().__init__()
        # The user count is not used by the network; it is kept so the constructor
        # matches the model the official checkpoint was trained with.
        self.user_num = user_num
        self.item_num = item_num
        self.config = config
        hidden = config.hidden_units
        self.item_emb = nn.Embedding(item_num + 1, hidden, padding_idx=0)
        self.pos_emb = nn.Embedding(config.maxlen + 1, hidden, padding_idx=0)
        self.emb_dropout = nn.Dropout(p=config.dropout_rate)
        self.attention_layernorms = nn.ModuleList()
        self.attention_layers = nn.ModuleList()
        self.forward_layernorms = nn.ModuleList()
        self.forward_layers = nn.ModuleList()
        for _ in range(config.num_blocks):
            self.attention_layernorms.append(nn.LayerNorm(hidden, eps=LAYER_NORM_EPS))
            self.attention_layers.append(nn.MultiheadAttention(hidden, config.num_heads, config.dropout_rate))
            self.forward_layernorms.append(nn.LayerNorm(hidden, eps=LAYER_NORM_EPS))
            self.forward_layers.append(PointWiseFeedForward(hidden, config.dropout_rate))
        self.last_layernorm = nn.LayerNorm(hidden, eps=LAYER_NORM_EPS)
        self._future_masks: dict[tuple[int, str], torch.Tensor] = {}

    def log2feats(self, log_seqs: torch.Tensor) -> torch.Tensor:
        """One feature vector per position, each seeing only itself and earlier positions."""
        seqs = self.item_emb(log_seqs) * (self.item_emb.embedding_dim**0.5)
        length = log_seqs.shape[1]
        positions = torch.arange(1, length + 1, device=log_seqs.device).expand_as(log_seqs)
        # Padding gets position 0, whose embedding is the zero padding row.
        seqs = seqs + self.pos_emb(positions * (log_seqs != 0))
        seqs = self.emb_dropout(seqs)
        future = self._future_mask(length, log_seqs.device)
        for attn_norm, attention, ffn_norm, feed_forward in zip(
            self.attention_layernorms, self.attention_layers, self.forward_layernorms, self.forward_layers
        ):
            seqs = seqs.transpose(0, 1)  # nn.MultiheadAttention here is time-first
            queries = attn_norm(seqs)
            attended, _ = attention(queries, seqs, seqs, attn_mask=future)
            seqs = (queries + attended).transpose(0, 1)
            seqs = feed_forward(ffn_norm(seqs))
        return self.last_layernorm(seqs)

    def _future_mask(self, length: int, device: torch.device) -> torch.Tensor:
        """True where a position would see a later one; made once per length and device (making
        it took ~3 ms of each recommendation on a busy 2-core machine, as long as the model itself)."""
        key = (length, str(device))
        mask = self._future_masks.get(key)
        if mask is None:
            mask = self._future_masks[key] = ~torch.tril(torch.ones((length, length), dtype=torch.bool, device=device))
        return mask

    def forward(
        self, user_ids: torch.Tensor | None, log_seqs: torch.Tensor, pos_seqs: torch.Tensor, neg_seqs: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Training logits of the true next item and of a sampled negative at every position."""
        feats = self.log2feats(log_seqs)
        pos_logits = (feats * self.item_emb(pos_seqs)).sum(dim=-1)
        neg_logits = (feats * self.item_emb(neg_seqs)).sum(dim=-1)
        return pos_logits, neg_logits

    def predict(
        self, user_ids: torch.Tensor | None, log_seqs: torch.Tensor, item_indices: torch.Tensor
    ) -> torch.Tensor:
        """Scores (batch, len(item_indices)) of candidate items as the next item after each sequence."""
        final_feat = self.log2feats(log_seqs)[:, -1, :]
        return final_feat @ self.item_emb(item_indices).T


_BLOCK_KEY = re.compile(r"^attention_layers\.(\d+)\.in_proj_weight$")


def unwrap_state_dict(checkpoint: object) -> Mapping[str, torch.Tensor]:
    """The state dict inside a checkpoint: a plain one, or one wrapped under "state_dict"/"model"."""
    if isinstance(checkpoint, Mapping):
        for key in ("state_dict", "model"):
            if isinstance(checkpoint.get(key), Mapping):
                return checkpoint[key]
        return checkpoint
    raise ValueError(f"expected a state dict, got {type(checkpoint).__name__}")


def config_from_state_dict(
    state_dict: Mapping[str, torch.Tensor], num_heads: int = DEFAULT_NUM_HEADS
) -> tuple[int, SASRecConfig]:
    """(item_num, config) read off the tensor shapes, so checkpoints of any size load without flags.

    Raises KeyError/ValueError when the tensors are not a SASRec state dict.
    """
    item_rows, hidden = state_dict["item_emb.weight"].shape
    maxlen = state_dict["pos_emb.weight"].shape[0] - 1
    blocks = sum(1 for key in state_dict if _BLOCK_KEY.match(key))
    if blocks == 0:
        raise KeyError("attention_layers.0.in_proj_weight")
    if hidden % num_heads:
        raise ValueError(f"hidden size {hidden} is not divisible by {num_heads} attention heads")
    return item_rows - 1, SASRecConfig(hidden_units=hidden, num_blocks=blocks, num_heads=num_heads, maxlen=maxlen)
