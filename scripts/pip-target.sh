# Sourced by the scripts that install a Python package into lynx's cache folder (sslib.sh,
# kvalidate.sh, nvrtc.sh).
#
# lynx_pip_target PREFIX PIP_INSTALL_ARGS...
#   Install into PREFIX with `pip install --target`, once: a `.complete` marker records a finished
#   install, and an unfinished one is removed and done again. Python is $LYNX_PYTHON or python3.
lynx_pip_target() {
  local prefix=$1
  shift
  if [ ! -e "$prefix/.complete" ]; then
    rm -rf "$prefix"
    mkdir -p "$prefix"
    PIP_ROOT_USER_ACTION=ignore "${LYNX_PYTHON:-python3}" -m pip install --quiet --disable-pip-version-check \
      --target "$prefix" "$@" >&2
    touch "$prefix/.complete"
  fi
}
