"""``workbench convert SRC DST --to FORMAT``: stream a checkpoint into another framework's names and layout."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXAMPLES = """examples:
  workbench convert hf_llama/ llama.ckpt --to mindformers --verify
  workbench convert hf_llama/ llama_mf.safetensors --to mindformers --dtype bf16
  workbench convert megatron_ckpt/ llama.ckpt --to mindformers --config pretrain_llama2_7b.sh
  workbench convert llama.ckpt Llama-3-8B.hf --to hf --arch llama --config pretrain_llama3_8b.sh
  workbench convert hf_qwen3/ qwen3_mcore/ --to mindformers_mcore --pad-vocab-to 152064 --workers 4
"""
DETAILS = """SRC: HF safetensors (file, folder, sharded index), HF .bin, a Megatron legacy checkpoint (TP/PP
shards are merged), a MindSpore .ckpt or safetensors. DST: with --to hf always a Hugging Face model
folder (config.json + model.safetensors, or shards + index); otherwise .ckpt (MindSpore), .safetensors,
or a folder. Formats: hf, megatron, mindformers, mindformers_qkv_concat, mindformers_mcore (see
converters/*.yaml). Exit 0 done, 2 bad input; nothing is left half-written (docs/convert-output.md).
DST may not be (or, as a folder, hold) a file of SRC. Renamed tensors are copied byte for byte."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("convert", help="convert a checkpoint between HF, Megatron and MindFormers formats",
                                   description=__doc__.replace("``", "") + "\n\n" + DETAILS, epilog=EXAMPLES,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path)
    parser.add_argument("destination", type=Path)
    parser.add_argument("--to", required=True, help="target format (hf, megatron, mindformers, ...)")
    parser.add_argument("--arch", help="architecture spec in converters/ (default: detected from the names)")
    parser.add_argument("--from", dest="source_format", metavar="FORMAT",
                        help="source format when the names alone are ambiguous (e.g. megatron vs mindformers_mcore)")
    parser.add_argument("--config", type=Path, help="model config for shape parameters (HF config.json, "
                                                    "Megatron script/log/args, MindFormers yaml)")
    parser.add_argument("--dtype", choices=("fp32", "fp16", "bf16"), help="cast every floating tensor")
    parser.add_argument("--pad-vocab-to", type=int, metavar="N", help="pad embedding / output rows to N (zeros); N below the vocabulary is refused")
    parser.add_argument("--verify", action="store_true", help="check every output tensor bit for bit before the output is moved into place")
    parser.add_argument("--workers", type=int, default=1, help="tensors computed ahead in parallel (memory: N tensors)")
    parser.add_argument("--allow-unmapped", action="store_true", help="skip source tensors the spec does not map")
    parser.add_argument("--force", action="store_true", help="overwrite an existing destination")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..convert.destination import check_destination
    from ..convert.run import ConvertOptions, convert
    from ..convert.staging import check_not_a_source
    from ..errors import InputError
    from ..output_checks import check_output, output_kind

    check_not_a_source(args.destination, [args.source])     # before "--force" is suggested for the input itself
    check_output(args.destination, True, allow_folder=True)      # devices, sockets, parent folder, permissions
    if output_kind(args.destination) == "stream":                # a pipe or device is written into, never replaced
        if args.verify:
            raise InputError(str(args.destination), "--verify re-reads the output, which a device or pipe cannot "
                             "give back", "convert to a regular file, or drop --verify")
    else:
        check_destination(args.destination, args.to, args.force)  # the output's kind, and --force for what exists
    options = ConvertOptions(to=args.to, arch=args.arch, source_format=args.source_format, config=args.config, dtype=args.dtype,
                             pad_vocab_to=args.pad_vocab_to, verify=args.verify, workers=max(1, args.workers),
                             allow_unmapped=args.allow_unmapped, progress=True)
    report = convert(args.source, args.destination, options)
    print(f"{report.source_format} → {report.target_format} ({report.arch}): {report.tensors} tensors, "
          f"{report.bytes_written / 2**20:.1f} MiB in {report.seconds:.2f} s → {report.destination}"
          + (" (verified bit for bit)" if report.verified else ""), file=sys.stderr)
    if report.tied:
        print(f"tied: {', '.join(report.tied)} is the embedding (no separate tensor written)", file=sys.stderr)
    if report.assumed:
        print(f"config.json: {', '.join(report.assumed[1:])} assumed ({report.assumed[0]}; pass --config to set them)",
              file=sys.stderr)
    if report.unmapped:
        print(f"skipped {len(report.unmapped)} unmapped source tensors: {', '.join(report.unmapped[:8])}"
              + (" ..." if len(report.unmapped) > 8 else ""), file=sys.stderr)
    return 0
