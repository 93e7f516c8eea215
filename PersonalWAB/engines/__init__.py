"""The engines behind the web functions, memory, PUMA and construction: BM25 search
(`search`), the SASRec recommender (`recommender`) and the MiniLM text embedder
(`text_embedding`); `shared.Engines` opens them lazily, once per run."""
