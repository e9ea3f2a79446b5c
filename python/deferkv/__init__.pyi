from typing import Any, Dict, Iterable, Iterator, List, Literal, Mapping, Optional, Sequence, Union, overload

Messages = Sequence[Mapping[str, str]]

class Error(RuntimeError): ...

class KvStats:
    press: str
    entries: List[List[int]]
    bytes: int
    peak_bytes: int
    bytes_per_entry: int
    capture_seconds: float
    eviction_seconds: float

class GenerateResult:
    text: str
    tokens: List[int]
    stop_reason: str
    kv: KvStats
    timings: Dict[str, float]
    prompt_tokens: int
    seed: int

class Model:
    def __init__(self, path: Optional[str] = None, n_threads: int = 1, n_ctx: int = 0) -> None: ...
    def tokenize(self, text: str, add_bos: bool = True, parse_special: bool = False) -> List[int]: ...
    def detokenize(self, ids: Iterable[int]) -> str: ...
    @property
    def chat_template(self) -> str: ...
    @property
    def metadata(self) -> Dict[str, Any]: ...
    @overload
    def generate(self, prompt: Union[str, Messages], max_tokens: int = 128, temperature: float = 0.8,
                 top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05, seed: Optional[int] = None,
                 stop: Sequence[str] = (), press: str = "full", kv_budget: Optional[int] = None,
                 kv_ratio: Optional[float] = None, draft_model: Optional[str] = None,
                 stream: Literal[False] = False, chat_template: str = "") -> GenerateResult: ...
    @overload
    def generate(self, prompt: Union[str, Messages], max_tokens: int = 128, temperature: float = 0.8,
                 top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05, seed: Optional[int] = None,
                 stop: Sequence[str] = (), press: str = "full", kv_budget: Optional[int] = None,
                 kv_ratio: Optional[float] = None, draft_model: Optional[str] = None,
                 *, stream: Literal[True], chat_template: str = "") -> Iterator[str]: ...
    def compress(self, context: str, press: str = "full", kv_budget: Optional[int] = None,
                 kv_ratio: Optional[float] = None) -> CompressedContext: ...

class CompressedContext:
    @property
    def context_tokens(self) -> int: ...
    @property
    def kv(self) -> KvStats: ...
    def answer(self, question: str, max_tokens: int = 128, temperature: float = 0.0, top_k: int = 40,
               top_p: float = 0.95, min_p: float = 0.05, seed: Optional[int] = None,
               stop: Sequence[str] = ()) -> GenerateResult: ...

def presses() -> List[Dict[str, Any]]: ...
def score(rows: Iterable[Mapping[str, Any]], benchmark: Optional[str] = None) -> Dict[str, Any]: ...
