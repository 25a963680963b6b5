"""Per-card model states for ZeRO stage k on n cards, from the shared calculator."""
from coursework.memory_calc import TrainingSetup, estimate

SIZES = [1, 3, 7, 13, 30, 70]
CARDS = [2, 4, 8, 16, 64]


def generate(rng):
    b, n, stage = rng.choice(SIZES), rng.choice(CARDS), rng.randint(0, 3)
    est = estimate(TrainingSetup(params=b * 1e9, cards=n, stage=stage))
    total, full = est.total_bytes, 16 * b * 1e9
    reject = [f"{total / 2 ** 30:.4g} GB"]
    if stage:
        reject.append(f"{full / 1e9:g} GB")
    else:
        reject.append(f"{full / n / 1e9:.4g} GB")
    expr = est.formula.get("expr", "")
    plain_zh, plain_en = ("，即普通 DDP，什么都不切" , ", i.e. plain DDP, nothing sharded") if stage == 0 else ("", "")
    formula_zh = (f"每卡 = {expr}（Ψ = {b:g}B = {b:g}×10⁹ 个参数，N = {n}；ZeRO 第 {stage} 级{plain_zh}）"
                  f"= {total / 1e9:.4g} GB")
    formula_en = (f"per card = {expr}  (Ψ = {b:g}B = {b:g}×10⁹ parameters, N = {n}; ZeRO stage {stage}{plain_en})"
                  f" = {total / 1e9:.4g} GB")
    return {"params": {"billions": f"{b:g}", "cards": n, "stage": stage, "unsharded": full if stage else -1,
                       "formula_zh": formula_zh, "formula_en": formula_en},
            "answer": total, "accept": [f"{total / 1e9:.4g} GB", f"{total / 2 ** 30:.4g} GiB"], "reject": reject}
