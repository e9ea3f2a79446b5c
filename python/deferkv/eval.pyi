from typing import Any, Dict, Optional, Sequence, Union

Numbers = Union[int, float, str, Sequence[Union[int, float, str]]]

def run(bench: str = "ruler", *, model: Optional[str] = None, tasks: Union[str, Sequence[str], None] = None,
        lengths: Numbers = (), depths: Union[float, Sequence[float], None] = None,
        press: Union[str, Any, Sequence[Any]] = "full", kv_budget: Union[int, Sequence[int], None] = None,
        kv_ratio: Union[float, Sequence[float], None] = None, samples: Optional[int] = None, seed: int = 42,
        temperature: float = 0.0, top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05, threads: int = 0,
        n_batch: int = 512, cache_type_k: str = "f16", cache_type_v: str = "f16", question_agnostic: bool = False, questions_per_context: int = 1,
        context_mode: str = "independent", output: str = "results",
        name: Optional[str] = None, shard: str = "1/1", chat: bool = True, chat_template: str = "",
        draft_model: Optional[str] = None, data_dir: Optional[str] = None, squad: Optional[str] = None,
        hotpotqa: Optional[str] = None, longbench_dir: Optional[str] = None, max_length: Optional[int] = None,
        word_split: str = "all", progress: bool = True) -> Dict[str, Any]: ...
