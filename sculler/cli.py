"""``sculler`` command line: train, infer, export (ONNX), summary and check-grad.

User errors (a missing file, a config that fails, an unknown layer type) print one line
``sculler: error: ...`` on stderr and exit with status 2; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from sculler.core.model_config import ModelConfig
from sculler.validate import integer

V2_GLOBALS = ("cost", "optimizer", "train_reader")


def _positive_int(text: str) -> int:
    """argparse type of ``--num_passes``: 0 would train nothing, so it is refused."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an int, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (0 passes would train "
                                         f"nothing), got {value}")
    return value


class UserError(Exception):
    """A mistake in what the user asked for; reported as one line, exit status 2."""


USER_ERRORS = (UserError, OSError, ValueError, TypeError, KeyError, ImportError,
               NotImplementedError)


def load_source(spec: str | Callable) -> Callable:
    """``"module:function"`` -> ``function()``, a reader; a reader creator (such as
    ``define_py_data_sources2``'s) is called. The module may sit beside the config (its
    directory is on ``sys.path`` while a command runs)."""
    if callable(spec):
        return spec()
    module_name, _, fn = spec.partition(":")
    if not fn:
        raise ValueError(f"data source {spec!r} must look like 'module:function'")
    module = importlib.import_module(module_name)
    creator = getattr(module, fn, None)
    if not callable(creator):
        found = sorted(n for n, v in vars(module).items()
                       if callable(v) and not n.startswith("_") and getattr(
                           v, "__module__", None) == module.__name__)
        raise UserError(f"data source {spec!r}: module {module_name!r} has no function {fn!r}; "
                        f"its functions: {found}")
    return creator()


def set_data_kinds(model: ModelConfig, sample: tuple, input_types: dict) -> None:
    """Give each data layer the storage kind of its field: ``input_types[name]`` if given,
    else from the first sample (a Python/NumPy integer -> ids, anything else -> dense)."""
    names = model.input_layer_names
    if len(sample) != len(names):
        raise ValueError(
            f"the train reader yields samples of {len(sample)} fields but the config has "
            f"{len(names)} data layers {names}"
        )
    for name, field in zip(names, sample):
        layer = model.layer(name)
        declared = input_types.get(name)
        if declared is not None:
            layer.attrs["kind"], layer.attrs["seq_type"] = declared.kind, declared.seq_type
        elif isinstance(field, (int, np.integer)):
            layer.attrs["kind"] = "ids"
        elif isinstance(field, (float, np.floating)) and layer.size > 1:
            raise UserError(
                f"data layer {name!r} (size {layer.size}): the train reader's field "
                f"{names.index(name)} is the float {field!r}, which cannot fill a dense vector "
                f"of {layer.size}; a class label must be an int: yield int(label), or declare "
                f"data_sources(..., input_types={{{name!r}: sculler.data_type.integer_value("
                f"{layer.size})}})")


def make_optimizer(settings: dict) -> Any:
    """The sculler.optimizer object the v1 ``settings(...)`` describe."""
    from sculler import optimizer

    method = settings["learning_method"]
    keywords = {k: settings[k] for k in (
        "learning_rate_decay_a", "learning_rate_decay_b", "learning_rate_schedule",
        "learning_rate_args") if k in settings}
    return getattr(optimizer, method.optimizer)(
        learning_rate=settings["learning_rate"],
        regularization=settings.get("regularization"),
        gradient_clipping_threshold=settings.get("gradient_clipping_threshold"),
        model_average=settings.get("model_average"),
        **keywords, **method.kwargs,
    )


def run_script(path: str, config_args: str = "") -> tuple[Any, dict]:
    """Run a config file or script: ``(TrainerConfig or None, module globals)``. Whatever
    the file raises becomes a :class:`UserError` naming the file."""
    from sculler.config.config_parser import run_config

    if not os.path.isfile(path):
        raise UserError(f"config file {path!r} not found")
    try:
        return run_config(path, config_args)
    except SystemExit as exc:
        raise UserError(f"{path}: the script exited ({exc.code}) while being loaded") from exc
    except Exception as exc:
        raise UserError(f"{path}: {type(exc).__name__}: {exc}") from exc


def load_program(path: str, config_args: str) -> dict:
    """What to train: a v1 config (layers declared with ``Layer``/helpers, ``settings`` and
    ``data_sources``) or a v2 script whose module globals name ``cost``, ``optimizer``,
    ``train_reader`` (and optionally ``test_reader``, ``batch_size``, ``num_passes``,
    ``feeding``). Returns those items, with ``topology`` ready to train."""
    parsed, names = run_script(path, config_args)
    return program_of(path, parsed, names)


def program_of(path: str, parsed: Any, names: dict) -> dict:
    """The training items of a loaded v1 config or v2 script (see :func:`load_program`)."""
    from sculler.topology import Topology

    if parsed is not None:
        settings = parsed.settings
        if "train_source" not in settings or "learning_method" not in settings:
            raise UserError(
                f"{path}: declare the data with data_sources(train=..., test=...) and the "
                "training with settings(batch_size=..., ...) (from sculler.config.helpers)"
                + _readers_in_config_note(names)
            )
        train_reader = load_source(settings["train_source"])
        input_types = settings["input_types"]
        if hasattr(settings["train_source"], "input_types"):  # a @provider's own types
            declared = settings["train_source"].input_types()
            input_types = declared if isinstance(declared, dict) else dict(
                zip(parsed.model_config.input_layer_names, declared))
        set_data_kinds(parsed.model_config, next(iter(train_reader())), input_types)
        return {
            "topology": Topology.from_model_config(parsed.model_config),
            "optimizer": make_optimizer(settings),
            "train_reader": train_reader,
            "test_reader": load_source(settings["test_source"])
            if settings.get("test_source") else None,
            "batch_size": settings["batch_size"],
            "num_passes": settings.get("num_passes"),
            "feeding": None,
        }
    missing = [k for k in V2_GLOBALS if k not in names]
    if missing:
        raise UserError(
            f"{path}: neither a v1 config (no layers declared) nor a v2 script (module globals "
            f"{missing} are missing; a v2 script defines cost, optimizer and train_reader, "
            "or a main() function)"
        )
    return {
        "topology": Topology(names["cost"]),
        "optimizer": names["optimizer"],
        "train_reader": names["train_reader"],
        "test_reader": names.get("test_reader"),
        "batch_size": names.get("batch_size", 128),
        "num_passes": names.get("num_passes"),
        "feeding": names.get("feeding"),
    }


def _readers_in_config_note(names: dict) -> str:
    """A hint when the config defines functions of its own but names no data source: a
    reader written in the config cannot be given to data_sources, which imports it."""
    own = [n for n, v in names.items() if callable(v) and not n.startswith("_")
           and getattr(v, "__module__", None) == "__sculler_config__"]
    if not own:
        return ""
    return (f"; the config defines {own}, but a reader written in the config itself cannot be "
            "used: move it into a module beside the config (e.g. provider.py) and name it, "
            "data_sources(train='provider:train')")


def load_topology(path: str, config_args: str = "") -> Any:
    """The topology a config file describes: a v1 config's model, or a v2 script's
    module-level ``cost`` (a layer or a list of layers)."""
    from sculler.layer import LayerOutput
    from sculler.topology import Topology

    parsed, names = run_script(path, config_args)
    if parsed is not None:
        return Topology.from_model_config(parsed.model_config)
    cost = names.get("cost")
    if isinstance(cost, LayerOutput) or (
            isinstance(cost, (list, tuple)) and cost
            and all(isinstance(c, LayerOutput) for c in cost)):
        return Topology(cost)
    raise UserError(f"{path}: declares no v1 layers and no module-level `cost` layer, so it "
                    "has no topology to read")


def output_layers(topology: Any, names: str | None) -> list:
    """The layers to infer/export: ``names`` (comma-separated), else each cost layer's
    first input that is not a data layer (the prediction), else the topology's outputs."""
    from sculler.core.layer import get_layer_class

    if names:
        return [topology.get_layer(n.strip()) for n in names.split(",") if n.strip()]
    found: dict[str, Any] = {}
    for out in topology.layers:
        if get_layer_class(out.layer_type).is_cost:
            preds = [p for p in out.parents if p.layer_type != "data"]
            if preds:
                found.setdefault(preds[0].name, preds[0])
        else:
            found.setdefault(out.name, out)
    if not found:
        raise UserError("cannot tell which layer is the prediction; name it with "
                        "--output_layer")
    return list(found.values())


def load_parameters(path: str) -> Any:
    from sculler.parameters import Parameters

    if not os.path.isfile(path):
        raise UserError(f"parameter file {path!r} not found")
    try:
        with open(path, "rb") as f:
            return Parameters.from_tar(f)
    except Exception as exc:
        raise UserError(f"{path}: not a parameter tar ({exc})") from exc


def check_gpu_flag(args: argparse.Namespace) -> None:
    """``--use_gpu`` without CuPy or a CUDA device stops before any work, saying what is
    missing and how to install it (never a silent CPU run)."""
    from sculler import backend

    reason = backend.gpu_unavailable_reason() if args.use_gpu else None
    if reason is not None:
        raise UserError(f"sculler {args.command} --use_gpu: {reason}")


def train_command(args: argparse.Namespace) -> int:
    check_gpu_flag(args)
    parsed, names = run_script(args.config, args.config_args)
    if parsed is None and not all(k in names for k in V2_GLOBALS) and callable(
            names.get("main")):
        return run_main(names["main"], args)
    return train_program(program_of(args.config, parsed, names), args)


def run_main(main_fn: Callable, args: argparse.Namespace) -> int:
    """Run a script's own ``main()``, passing the CLI options its signature accepts. Given
    options it does not accept: --num_passes, --checkpoint, --logdir and --use_gpu are errors
    (the run would not do what was asked), the others a warning."""
    wanted = {"num_passes": args.num_passes, "seed": args.seed, "checkpoint": args.checkpoint,
              "logdir": args.logdir, "save_dir": args.save_dir,
              "show_progress": False if args.no_progress else None,
              "use_gpu": True if args.use_gpu else None}
    accepted = inspect.signature(main_fn).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in accepted.values())
    given = {k: v for k, v in wanted.items() if v is not None}
    ignored = [k for k in given if k not in accepted and not takes_any]
    refused = [k for k in ignored if k in ("num_passes", "checkpoint", "logdir", "use_gpu")]
    if refused:
        raise UserError(f"{args.config}: its main() does not accept "
                        f"{', '.join('--' + k for k in refused)} (its parameters: "
                        f"{list(accepted)})")
    if ignored:
        flags = ["--no_progress" if k == "show_progress" else "--" + k for k in ignored]
        print(f"sculler: warning: {args.config}: main() does not accept {', '.join(flags)}; "
              "ignored", file=sys.stderr)
    kwargs = {k: v for k, v in given.items() if k in accepted or takes_any}
    result = main_fn(**kwargs)
    if isinstance(result, (float, np.floating)):
        print(f"Finished: the main() of {args.config} returned {float(result):.4g}.")
    elif isinstance(result, (int, str, np.integer)) and not isinstance(result, bool):
        print(f"Finished: the main() of {args.config} returned {result}.")
    return 0


def train_program(program: dict, args: argparse.Namespace) -> int:
    """Train a v1 config or v2 script's items with the CLI's loop (per-pass lines, test,
    a parameter tar per pass)."""
    import sculler as paddle

    paddle.init(use_gpu=args.use_gpu, seed=1 if args.seed is None else args.seed)
    topology, test_reader = program["topology"], program["test_reader"]
    parameters = paddle.parameters.create(topology)
    trainer = paddle.trainer.SGD(cost=topology, parameters=parameters,
                                 update_equation=program["optimizer"])
    batch_size = program["batch_size"]
    num_passes = (args.num_passes if args.num_passes is not None
                  else program["num_passes"] if program["num_passes"] is not None else 10)
    try:
        num_passes = integer(num_passes, "num_passes", minimum=1)
    except (TypeError, ValueError) as e:
        raise UserError(f"{args.config}: {e}") from None
    save_dir = args.save_dir or "output"
    os.makedirs(save_dir, exist_ok=True)
    board = paddle.plot.TensorBoard(args.logdir) if args.logdir else None
    costs: list[float] = []
    ran: list[int] = []  # the passes this run trained (a resumed run starts later)
    result = None

    def on_event(event: Any) -> None:
        nonlocal result
        if isinstance(event, paddle.event.EndIteration):
            costs.append(event.cost)
        elif isinstance(event, paddle.event.EndPass):
            ran.append(event.pass_id)
            line = f"Pass {event.pass_id}: train cost {np.mean(costs):.4f}"
            line += "".join(f", {k} {v:.4f}" for k, v in event.metrics.items())
            costs.clear()
            if test_reader is not None:
                result = trainer.test(reader=paddle.batch(test_reader, batch_size),
                                      feeding=program["feeding"])
                if board is not None:
                    board(result)
                line += f" | test cost {result.cost:.4f}"
                line += "".join(f", {k} {v:.4f}" for k, v in result.metrics.items())
            print(line, flush=True)
            parameters.to_tar(os.path.join(save_dir, f"pass-{event.pass_id:05d}.tar"))

    if args.checkpoint and os.path.exists(args.checkpoint):
        trainer.load_checkpoint(args.checkpoint)
        print(f"Resuming from {args.checkpoint} at pass {trainer.next_pass}", flush=True)
    start = time.perf_counter()
    handlers = [board, on_event] if board is not None else on_event
    trainer.train(
        reader=paddle.batch(paddle.reader.shuffle(program["train_reader"], buf_size=8192),
                            batch_size),
        num_passes=num_passes, event_handler=handlers, feeding=program["feeding"],
        show_progress=False if args.no_progress else None, checkpoint=args.checkpoint,
    )
    elapsed = time.perf_counter() - start
    if board is not None:
        board.close()
    final = os.path.join(save_dir, "params.tar")
    parameters.to_tar(final)
    which = ""
    if ran and ran[0] > 0:  # resumed: say which passes this run trained
        which = (f" (pass {ran[0]} of {num_passes})" if len(ran) == 1
                 else f" (passes {ran[0]}-{ran[-1]} of {num_passes})")
    print(f"Trained {len(ran)} pass{'' if len(ran) == 1 else 'es'}{which} in {elapsed:.1f} s; "
          f"parameters saved to {final}")
    if result is not None and "classification_error_evaluator" in result.metrics:
        accuracy = 1.0 - result.metrics["classification_error_evaluator"]
        print(f"Test accuracy: {accuracy:.2%}")
    return 0


def read_inputs(path: str) -> np.ndarray:
    """Rows of a ``.npy`` or ``.csv`` (comma-separated numbers) file, as a 2-D array."""
    if not os.path.isfile(path):
        raise UserError(f"input file {path!r} not found")
    if path.endswith(".npy"):
        data = np.load(path, allow_pickle=False)
    elif path.endswith(".csv"):
        data = np.loadtxt(path, delimiter=",", dtype=np.float32, ndmin=2)
    else:
        raise UserError(f"input file {path!r}: expected a .npy or .csv file")
    if data.ndim == 1:
        data = data[None, :]
    if data.ndim != 2:
        raise UserError(f"input file {path!r}: expected rows of samples (2-D), got shape "
                        f"{data.shape}")
    return data


def infer_command(args: argparse.Namespace) -> int:
    from sculler.inference import infer
    from sculler.topology import Topology

    topology = load_topology(args.config, args.config_args)
    outputs = output_layers(topology, args.output_layer)
    parameters = load_parameters(args.params)
    data_layers = Topology(outputs).data_type()
    if len(data_layers) != 1:
        raise UserError(f"the outputs {[o.name for o in outputs]} read {len(data_layers)} data "
                        f"layers {[n for n, _ in data_layers]}; `sculler infer` feeds one")
    name, dtype = data_layers[0]
    rows = read_inputs(args.input)
    if dtype.type != 0 or dtype.seq_type != 0:
        raise UserError(f"data layer {name!r} is {dtype}; `sculler infer` feeds dense vectors")
    if rows.shape[1] != dtype.dim:
        raise UserError(f"{args.input}: rows have {rows.shape[1]} values but data layer "
                        f"{name!r} takes {dtype.dim}")
    result = infer(output_layer=outputs, parameters=parameters,
                   input=[(r,) for r in rows.astype(np.float32)], flatten_result=False)
    results = result if isinstance(result, list) else [result]
    merged = np.concatenate([np.asarray(r).reshape(len(rows), -1) for r in results], axis=1)
    if args.output:
        write_array(args.output, merged)
        print(f"wrote {merged.shape[0]} rows of {merged.shape[1]} values to {args.output}")
    else:
        np.savetxt(sys.stdout, merged, fmt="%.6g", delimiter=",")
    return 0


def write_array(path: str, data: np.ndarray) -> None:
    """Save ``data`` as .npy or .csv (by the extension), atomically."""
    from sculler.fileio import atomic_write

    if path.endswith(".npy"):
        atomic_write(path, lambda f: np.save(f, data, allow_pickle=False))
    elif path.endswith(".csv"):
        atomic_write(path, lambda f: np.savetxt(f, data, fmt="%.9g", delimiter=","))
    else:
        raise UserError(f"output file {path!r}: expected a .npy or .csv name")


def export_command(args: argparse.Namespace) -> int:
    from sculler import onnx

    topology = load_topology(args.config, args.config_args)
    outputs = output_layers(topology, args.output_layer)
    parameters = load_parameters(args.params)
    onnx.export(outputs, parameters, args.onnx, opset=args.opset)
    print(f"wrote {args.onnx}: outputs {[o.name for o in outputs]}")
    return 0


def summary_command(args: argparse.Namespace) -> int:
    print(load_topology(args.config, args.config_args).summary())
    return 0


def parse_widths(text: str) -> list[int]:
    """``"5,3"`` -> ``[5, 3]``: the widths of check-grad's dense inputs."""
    try:
        widths = [int(w) for w in text.split(",")]
    except ValueError:
        widths = []
    if not widths or min(widths) < 1:
        raise UserError(f"--inputs {text!r}: expected positive input widths separated by "
                        "commas, one per input, e.g. --inputs 5,3 for two inputs of widths 5 "
                        "and 3")
    return widths


def check_grad_command(args: argparse.Namespace) -> int:
    """Gradient-check a registered layer type on dense inputs of the given widths."""
    import runpy

    check_gpu_flag(args)
    from sculler.testing import INPUT_DATA, GradientCheckError, check_layer_grad

    for spec in args.module or []:
        if spec.endswith(".py"):
            runpy.run_path(spec, run_name="__sculler_layer__")
        else:
            importlib.import_module(spec)
    config = {"size": args.size, "active_type": args.act,
              "inputs": [INPUT_DATA(w) for w in parse_widths(args.inputs)]}
    try:
        report = check_layer_grad(config, args.type, args.batch_size, use_weight=args.use_weight,
                                  use_gpu=args.use_gpu)
    except GradientCheckError as err:
        print(f"FAILED: {err}")
        return 1
    for key, err in report.errors.items():
        print(f"{args.type}: {key}: relative error {err:.3g}")
    print(f"{args.type}: gradient check passed (worst {report.max_error:.3g})")
    return 0


COMMANDS = {"train": train_command, "infer": infer_command, "export": export_command,
            "summary": summary_command, "check-grad": check_grad_command}


def build_parser() -> argparse.ArgumentParser:
    from sculler import __version__

    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show the full traceback of an error")
    parser = argparse.ArgumentParser(
        prog="sculler", description="Sculler: train, infer, export (ONNX), summary, check-grad.")
    parser.add_argument("--version", action="version", version=f"sculler {__version__}")
    parser.add_argument("--debug", action="store_true", default=False,
                        help="show the full traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True)

    def with_config(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text, parents=[debug])
        p.add_argument("--config", required=True,
                       help="a v1 config file or a v2 script (Python)")
        p.add_argument("--config_args", default="", help="name=value,... for get_config_arg")
        return p

    train = with_config("train", "train a v1 config, a v2 script (module-level cost, "
                        "optimizer, train_reader) or a script's own main()")
    train.add_argument("--num_passes", type=_positive_int, default=None,
                       help="passes, at least 1 (default: the file's num_passes, else 10)")
    train.add_argument("--save_dir", default=None,
                       help="where parameter tars go (default: output)")
    train.add_argument("--seed", type=int, default=None, help="random seed (default 1)")
    train.add_argument("--checkpoint", default=None,
                       help="checkpoint file: resumed from when it exists, saved every pass")
    train.add_argument("--logdir", default=None, help="write TensorBoard scalars here")
    train.add_argument("--no_progress", action="store_true", help="no progress bar")
    train.add_argument("--use_gpu", action="store_true",
                       help="train on a CUDA GPU through CuPy (pip install "
                       "sculler[gpu-cuda12] or sculler[gpu-cuda13])")
    for name, text in (("infer", "predictions of a trained model for rows of a .npy/.csv"),
                       ("export", "write a trained model as ONNX")):
        p = with_config(name, text)
        p.add_argument("--params", required=True, help="the parameter tar (from train)")
        p.add_argument("--output_layer", default=None,
                       help="comma-separated output layer names (default: the input of each "
                       "cost layer)")
        if name == "infer":
            p.add_argument("--input", required=True, help="a .npy or .csv file, one row a "
                           "sample")
            p.add_argument("--output", default=None, help="a .npy or .csv file (default: "
                           "print CSV)")
        else:
            p.add_argument("--onnx", required=True, help="the .onnx file to write")
            p.add_argument("--opset", type=int, default=None, help="ONNX opset version")
    with_config("summary", "print the layers, their parameters and the total")
    check = sub.add_parser("check-grad", help="gradient-check a layer type", parents=[debug])
    check.add_argument("--type", required=True, help="the registered layer type, e.g. fc")
    check.add_argument("--inputs", required=True,
                       help="the widths of its dense inputs, comma-separated: 5,3 gives two "
                       "inputs of widths 5 and 3")
    check.add_argument("--size", type=int, default=4, help="the layer's size (default 4)")
    check.add_argument("--act", default="linear",
                       help="the layer's activation, e.g. tanh (default linear)")
    check.add_argument("--batch_size", type=int, default=10,
                       help="rows per input (default 10)")
    check.add_argument("--use_weight", action="store_true",
                       help="weight the checked output sum randomly (needed when the outputs "
                       "sum to a constant, as softmax's do)")
    check.add_argument("--use_gpu", action="store_true",
                       help="run the check with the layer's parameters and inputs on a CUDA GPU")
    check.add_argument("--module", action="append",
                       help="a module or .py file that registers the layer (repeatable)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command. The config's directory is on ``sys.path`` while it runs (a config
    imports the modules beside it, as ``python config.py`` would); output cut short by a
    closed pipe (``sculler infer ... | head``) ends quietly with status 141, as a command
    stopped by SIGPIPE does."""
    from sculler.config.config_parser import script_dir_on_path

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    config = getattr(args, "config", None)
    try:
        with script_dir_on_path(config) if config else contextlib.nullcontext():
            return COMMANDS[args.command](args)
    except BrokenPipeError:
        # stdout's reader is gone: point stdout at /dev/null so the interpreter's final
        # flush does not raise again, and say nothing
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except USER_ERRORS as exc:
        if args.debug:
            raise
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"sculler: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
