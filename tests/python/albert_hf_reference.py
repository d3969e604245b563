#!/usr/bin/python3
"""An independent check of dedloc's Hugging Face export of ALBERT (lib/dedloc/collab/hf_export.hpp).

Reads an exported folder the way transformers' AlbertForMaskedLM.from_pretrained would, without
transformers or the safetensors package (neither is in Debian): config.json, then model.safetensors parsed
by hand (an 8-byte little-endian header length, a JSON header, the data). It checks that every tensor name
and shape is what transformers' modeling_albert.py builds for that config (the full list, computed here from
the config; the tied predictions.decoder.* omitted as save_pretrained omits them), then runs ALBERT's
masked-LM forward pass in plain PyTorch, written from transformers' modeling_albert.py (AlbertEmbeddings,
AlbertAttention with the eager attention, AlbertLayer, AlbertLayerGroup, AlbertTransformer, AlbertMLMHead),
not from dedloc's C++.

    albert_hf_reference.py DIR [--inputs INPUTS.json] [--output LOGITS.safetensors]

INPUTS.json: {"input_ids": [[...], ...], "token_type_ids": [[...]], "attention_mask": [[...]]} (the last two
optional, as in transformers). The logits [B, T, vocab_size] are written to LOGITS.safetensors (one F32
tensor "logits") or, without --output, printed as JSON on stdout (the summary then goes to stderr). Prints
one summary line; exits 1 with the reasons when the folder does not match the layout. Used by
tests/torch/albert_hf_test.cpp.
"""

import argparse
import json
import math
import struct
import sys

import numpy as np
import torch

DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "F16": np.dtype("<f2"), "I64": np.dtype("<i8"),
          "I32": np.dtype("<i4")}


def read_safetensors(path):
    """The tensors (name -> torch.Tensor) and __metadata__ of a safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    metadata = header.pop("__metadata__", {})
    start = 8 + length
    tensors = {}
    for name, info in header.items():
        dtype = DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        array = np.frombuffer(data, dtype=dtype, count=(end - begin) // dtype.itemsize, offset=start + begin)
        tensors[name] = (info["dtype"], torch.from_numpy(array.reshape(info["shape"]).copy()))
    return tensors, metadata


def write_safetensors(path, tensors):
    """Writes name -> float32 numpy array as a safetensors file (the header padded to 8 bytes)."""
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        blob = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def expected_layout(config):
    """Every tensor AlbertForMaskedLM.save_pretrained writes for `config`, with its shape."""
    V, E, H = config["vocab_size"], config["embedding_size"], config["hidden_size"]
    I, P, T = config["intermediate_size"], config["max_position_embeddings"], config["type_vocab_size"]
    layout = {
        "albert.embeddings.word_embeddings.weight": [V, E],
        "albert.embeddings.position_embeddings.weight": [P, E],
        "albert.embeddings.token_type_embeddings.weight": [T, E],
        "albert.embeddings.LayerNorm.weight": [E],
        "albert.embeddings.LayerNorm.bias": [E],
        "albert.encoder.embedding_hidden_mapping_in.weight": [H, E],
        "albert.encoder.embedding_hidden_mapping_in.bias": [H],
    }
    for group in range(config.get("num_hidden_groups", 1)):
        for inner in range(config.get("inner_group_num", 1)):
            prefix = f"albert.encoder.albert_layer_groups.{group}.albert_layers.{inner}."
            for name in ("query", "key", "value", "dense"):
                layout[prefix + f"attention.{name}.weight"] = [H, H]
                layout[prefix + f"attention.{name}.bias"] = [H]
            layout[prefix + "attention.LayerNorm.weight"] = [H]
            layout[prefix + "attention.LayerNorm.bias"] = [H]
            layout[prefix + "ffn.weight"] = [I, H]
            layout[prefix + "ffn.bias"] = [I]
            layout[prefix + "ffn_output.weight"] = [H, I]
            layout[prefix + "ffn_output.bias"] = [H]
            layout[prefix + "full_layer_layer_norm.weight"] = [H]
            layout[prefix + "full_layer_layer_norm.bias"] = [H]
    layout.update({
        "predictions.dense.weight": [E, H],
        "predictions.dense.bias": [E],
        "predictions.LayerNorm.weight": [E],
        "predictions.LayerNorm.bias": [E],
        "predictions.bias": [V],
    })
    return layout


def layout_problems(config, tensors, metadata):
    problems = []
    if metadata.get("format") != "pt":
        problems.append(f"__metadata__ format is {metadata.get('format')!r}, transformers expects 'pt'")
    expected = expected_layout(config)
    for name in sorted(set(expected) - set(tensors)):
        problems.append(f"missing tensor {name} {expected[name]}")
    for name in sorted(set(tensors) - set(expected)):
        problems.append(f"unexpected tensor {name}")
    for name in sorted(set(expected) & set(tensors)):
        dtype, tensor = tensors[name]
        if dtype != "F32":
            problems.append(f"{name} is {dtype}, not F32")
        if list(tensor.shape) != expected[name]:
            problems.append(f"{name} has shape {list(tensor.shape)}, expected {expected[name]}")
    return problems


def activation(name):
    """transformers' ACT2FN for the names an ALBERT config uses."""
    if name == "gelu_new":  # NewGELUActivation: the tanh approximation
        return lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
    if name == "gelu":
        return lambda x: torch.nn.functional.gelu(x)
    if name == "relu":
        return torch.relu
    raise ValueError(f"hidden_act {name!r} is not supported here")


def masked_lm_logits(config, w, input_ids, token_type_ids, attention_mask):
    """AlbertForMaskedLM(...).logits in eval mode (dropout off), eager attention."""
    eps = config["layer_norm_eps"]
    act = activation(config["hidden_act"])
    heads = config["num_attention_heads"]
    head_size = config["hidden_size"] // heads
    layer_norm = lambda x, p: torch.nn.functional.layer_norm(x, x.shape[-1:], w[p + ".weight"], w[p + ".bias"], eps)
    linear = lambda x, p: torch.nn.functional.linear(x, w[p + ".weight"], w[p + ".bias"])

    # AlbertEmbeddings: word + token type + absolute position, LayerNorm.
    B, T = input_ids.shape
    position_ids = torch.arange(T).unsqueeze(0)
    embeddings = (w["albert.embeddings.word_embeddings.weight"][input_ids]
                  + w["albert.embeddings.token_type_embeddings.weight"][token_type_ids]
                  + w["albert.embeddings.position_embeddings.weight"][position_ids])
    hidden = layer_norm(embeddings, "albert.embeddings.LayerNorm")

    # _prepare_4d_attention_mask: [B, 1, T, T], 0 where attended, the dtype's minimum where masked.
    mask = attention_mask[:, None, None, :].expand(B, 1, T, T).to(torch.float32)
    mask = (1.0 - mask) * torch.finfo(torch.float32).min

    # AlbertTransformer: the projection to H, then num_hidden_layers applications of the layer groups.
    hidden = linear(hidden, "albert.encoder.embedding_hidden_mapping_in")
    layers, groups = config["num_hidden_layers"], config.get("num_hidden_groups", 1)
    for i in range(layers):
        group = int(i / (layers / groups))
        for inner in range(config.get("inner_group_num", 1)):
            p = f"albert.encoder.albert_layer_groups.{group}.albert_layers.{inner}."
            split = lambda x: x.view(B, T, -1, head_size).transpose(1, 2)
            query = split(linear(hidden, p + "attention.query"))
            key = split(linear(hidden, p + "attention.key"))
            value = split(linear(hidden, p + "attention.value"))
            scores = torch.matmul(query, key.transpose(2, 3)) * head_size ** -0.5 + mask
            probabilities = torch.softmax(scores, dim=-1)
            context = torch.matmul(probabilities, value).transpose(1, 2).reshape(B, T, -1)
            attended = layer_norm(hidden + linear(context, p + "attention.dense"), p + "attention.LayerNorm")
            ffn = linear(act(linear(attended, p + "ffn")), p + "ffn_output")
            hidden = layer_norm(ffn + attended, p + "full_layer_layer_norm")

    # AlbertMLMHead: dense, activation, LayerNorm, then the decoder tied to the word embeddings (and its bias
    # tied to predictions.bias).
    projected = layer_norm(act(linear(hidden, "predictions.dense")), "predictions.LayerNorm")
    return torch.matmul(projected, w["albert.embeddings.word_embeddings.weight"].t()) + w["predictions.bias"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--inputs", help="JSON with input_ids (and token_type_ids, attention_mask)")
    parser.add_argument("--output", help="write the logits here as safetensors (else print them as JSON)")
    args = parser.parse_args()

    with open(f"{args.folder}/config.json") as f:
        config = json.load(f)
    if config.get("model_type") != "albert" or "AlbertForMaskedLM" not in config.get("architectures", []):
        sys.exit(f"{args.folder}/config.json is not an AlbertForMaskedLM config")
    tensors, metadata = read_safetensors(f"{args.folder}/model.safetensors")
    problems = layout_problems(config, tensors, metadata)
    if problems:
        print(f"{args.folder} does not match transformers' AlbertForMaskedLM layout:", file=sys.stderr)
        for problem in problems:
            print("  " + problem, file=sys.stderr)
        sys.exit(1)
    summary = f"ok: {len(tensors)} tensors match AlbertForMaskedLM's layout for config.json"
    if not args.inputs:
        print(summary)
        return

    with open(args.inputs) as f:
        inputs = json.load(f)
    input_ids = torch.tensor(inputs["input_ids"], dtype=torch.long)
    token_type_ids = torch.tensor(inputs.get("token_type_ids", torch.zeros_like(input_ids).tolist()), dtype=torch.long)
    attention_mask = torch.tensor(inputs.get("attention_mask", torch.ones_like(input_ids).tolist()), dtype=torch.long)
    weights = {name: tensor for name, (_, tensor) in tensors.items()}
    with torch.no_grad():
        logits = masked_lm_logits(config, weights, input_ids, token_type_ids, attention_mask)
    if args.output:
        write_safetensors(args.output, {"logits": logits.numpy()})
        print(f"{summary}; logits {list(logits.shape)} in {args.output}")
    else:
        print(json.dumps(logits.tolist()))
        print(f"{summary}; logits {list(logits.shape)}", file=sys.stderr)


if __name__ == "__main__":
    main()
