# Helpers of rules/report.smk (kept apart: `snakemake --lint` asks for rules and functions in separate files).
# What the report writes, where, under which caption, category and labels, is the catalogue's
# (cflcore/report/catalogue.py): the functions below only turn its entries into the rules' inputs and outputs.

# a line opening with `report` is the Snakefile keyword: the report() flag goes by another name in functions
from snakemake.io import report as report_file

from cflcore.report import catalogue
from cflcore.report.labels import figure_labels
from cflcore.report.parts import part_plan

REPORT_PLAN = report_plan(config)


def part_param(part):
    """The part of the report's plan (stages.report_plan) this part reads, as canonical JSON: a config change
    reruns only the parts it concerns (catalogue.Part.plan_keys). A function of the wildcards, not the
    string itself: Snakemake formats a string param with the wildcards, and config text may hold braces
    (e.g. a departure's "class groups {0} and {1}")."""
    value = canonical_json(part_plan(REPORT_PLAN, part))
    return lambda wildcards: value


def report_path(relative):
    return lay.report_file(RESULTS, relative)


def registered_table(output):
    """A table's CSV, registered in the HTML report under its category and subcategory, labelled by its title."""
    csv, *_ = output.paths()
    return report_file(
        report_path(csv),
        caption=f"../report/captions/{output.caption}.rst",
        category=output.category,
        subcategory=output.subcategory or None,
        labels={"table": output.title},
    )


def registered_figures(output):
    """A figure kind's folder, one subcategory of its category; every PNG labelled from its file name."""
    return report_file(
        directory(report_path(output.paths()[0])),
        patterns=["{name}.png"],
        caption=f"../report/captions/{output.caption}.rst",
        category=output.category,
        subcategory=output.subcategory,
        labels=lambda w, kind=output.kind: figure_labels(kind, w.name, STUDY),
    )


def part_outputs(part):
    """The part's outputs, named: its index entries (`part`), its tables (CSV registered, Markdown and LaTeX
    beside), its figure folders and pages, all from the catalogue."""
    outputs = catalogue.outputs_of(part)
    named = {
        "tables": [registered_table(o) for o in outputs if o.form == "table"],
        "wide": [report_path(p) for o in outputs if o.form == "table" for p in o.paths()[1:]],
        "figures": [registered_figures(o) for o in outputs if o.form == "figures"],
        "pages": [report_path(p) for o in outputs if o.form == "page" for p in o.paths()],
    }
    if part != catalogue.INDEX.name:
        named["part"] = report_path(lay.part_index_file(part))
    return {name: files for name, files in named.items() if files}


def part_files():
    """Every file and figure folder the parts write (the catalogue's paths), as plain paths."""
    return [report_path(p) for o in catalogue.OUTPUTS.values() if o.part != catalogue.INDEX.name for p in o.paths()]


def evaluated_runs(w):
    runs = run_list()
    return {name.split(".")[0]: [lay.eval_file(RESULTS, r, name) for r in runs] for name in fn.EVAL_OUTPUTS}


def whatif_inputs(w):
    return {
        **evaluated_runs(w),
        "whatif": [lay.eval_file(RESULTS, r, fn.WHATIF) for r in cc.whatif_runs(config)],
    }


def late_inputs(w):
    return {"late_clients": [lay.eval_file(RESULTS, r, fn.LATE_CLIENTS) for r in cc.late_client_runs(config)]}


def explain_inputs(w):
    runs = explain_runs()
    return {
        "insdel": [lay.explain_file(RESULTS, r, fn.INSDEL) for r in runs],
        "saliency": [lay.explain_file(RESULTS, r, fn.SALIENCY) for r in runs],
    }


# catalogue.Part.reads -> the input function of the part's rule
PART_INPUTS = {
    "evaluations": evaluated_runs,
    "whatif": whatif_inputs,
    "late_clients": late_inputs,
    "explain": explain_inputs,
}


def part_inputs(part):
    """The input function of the part's rule: what it reads (PART_INPUTS), the scores of the runs trained again on
    the kernel paths (the paper check's part), and the files of other studies it reads
    (catalogue.STUDY_INPUTS) that exist now, when the Snakefile is parsed: a re-made one re-makes the part; one made
    later is read all the same, and a later start reruns the part."""
    reads = PART_INPUTS[part.reads]
    others = [p for p in (REPORT_PLAN.get(catalogue.STUDY_INPUTS) or {}).get(part.name, []) if Path(p).is_file()]
    # the paper check's part also reads the runs trained again on each kernel path (report.kernel_paths)
    again = part.name == catalogue.OUTPUTS["paper_claims"].part and KERNEL_PATHS
    return lambda w: {
        **reads(w),
        **({catalogue.STUDY_INPUTS: others} if others else {}),
        **({"kernel_runs": kernel_runs_scores(w)} if again else {}),
    }
