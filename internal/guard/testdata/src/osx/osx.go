package osx
